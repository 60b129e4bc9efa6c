"""mx.metric: names, create() variants, values and local/global bookkeeping.

Expected numbers marked "mxnet 1.9.1" were produced by running the same
inputs through mxnet 1.9.1's ``mx.metric``.
"""
import math

import numpy as np
import pytest
import torch

from module_api import metric
from runtime.ndarray import NDArray, as_ndarray


def nd(x, dtype=np.float32):
    return as_ndarray(torch.from_numpy(np.asarray(x, dtype=dtype)))


# The mxnet docstring examples (hand-checkable).
DOC_PRED = [[0.3, 0.7], [0, 1.], [0.4, 0.6]]
DOC_LABEL = [0, 1, 1]
REG_PRED = np.array([3, -0.5, 2, 7]).reshape(4, 1)
REG_LABEL = np.array([2.5, 0.0, 2, 8]).reshape(4, 1)

# Random-ish scores, rounded so they can be written down.
P6 = np.array([[0.08, 0.78, 0.44, 0.72],
               [0.98, 0.54, 0.5, 0.07],
               [0.27, 0.5, 0.68, 0.8],
               [0.38, 0.07, 0.29, 0.91],
               [0.21, 0.45, 0.93, 0.02],
               [0.6, 0.95, 0.23, 0.55]], dtype=np.float32)
L6 = np.array([0, 3, 1, 2, 2, 1], dtype=np.float32)


def _update(m, labels, preds):
    m.update([nd(x) for x in labels], [nd(x) for x in preds])
    return m


@pytest.mark.parametrize("spec,kwargs,name", [
    ('acc', {}, 'accuracy'),
    ('accuracy', {}, 'accuracy'),
    ('Accuracy', {}, 'accuracy'),
    ('top_k_accuracy', {'top_k': 5}, 'top_k_accuracy_5'),
    ('top_k_acc', {'top_k': 2}, 'top_k_accuracy_2'),
    ('ce', {}, 'cross-entropy'),
    ('crossentropy', {}, 'cross-entropy'),
    ('nll_loss', {}, 'nll-loss'),
    ('perplexity', {'ignore_label': None}, 'perplexity'),
    ('mse', {}, 'mse'),
    ('mae', {}, 'mae'),
    ('rmse', {}, 'rmse'),
    ('f1', {}, 'f1'),
    ('mcc', {}, 'mcc'),
    ('pearsonr', {}, 'pearsonr'),
    ('pcc', {}, 'pcc'),
    ('loss', {}, 'loss'),
    ('torch', {}, 'torch'),
    ('caffe', {}, 'caffe'),
    ('composite', {}, 'composite'),
])
def test_names_match_mxnet(spec, kwargs, name):
    m = metric.create(spec, **kwargs)
    assert isinstance(m, metric.EvalMetric)
    assert m.name == name


def test_create_variants():
    acc = metric.Accuracy()
    assert metric.create(acc) is acc
    comp = metric.create([acc, 'ce', 'rmse'])
    assert isinstance(comp, metric.CompositeEvalMetric)
    assert comp.get()[0] == ['accuracy', 'cross-entropy', 'rmse']
    assert comp.get_metric(0) is acc

    custom = metric.create(lambda label, pred: 0.0)
    assert isinstance(custom, metric.CustomMetric)
    assert custom.name == 'custom(<lambda>)'

    def my_feval(label, pred):
        return 1.0
    assert metric.create(my_feval).name == 'my_feval'
    assert metric.np(my_feval).name == 'my_feval'
    assert metric.create('{"metric": "acc", "axis": 1}').name == 'accuracy'
    assert metric.create('["top_k_accuracy", {"top_k": 3}]').name == 'top_k_accuracy_3'
    rebuilt = metric.create(metric.create(['acc', 'ce']).get_config())
    assert rebuilt.get()[0] == ['accuracy', 'cross-entropy']
    with pytest.raises(AssertionError):
        metric.create('no_such_metric')
    with pytest.raises(AssertionError):
        metric.TopKAccuracy(top_k=1)


def test_register_custom_subclass():
    @metric.register
    class MyAcc(metric.EvalMetric):
        def __init__(self):
            super().__init__('myacc')

        def update(self, labels, preds):
            self.sum_metric += 1
            self.num_inst += 2

    m = metric.create('myacc')
    m.update([], [])
    assert m.get() == ('myacc', 0.5)
    assert m.get_global() == m.get()   # no global stats: falls back to local


def test_docstring_examples():
    # values printed in mxnet 1.9.1's own docstrings
    def one(m, label, pred):
        return _update(m, [label], [pred]).get()[1]
    assert one(metric.Accuracy(), DOC_LABEL, DOC_PRED) == pytest.approx(2 / 3)
    assert one(metric.F1(), DOC_LABEL, DOC_PRED) == pytest.approx(0.8)
    assert one(metric.CrossEntropy(), DOC_LABEL, DOC_PRED) == pytest.approx(0.57159948, rel=1e-6)
    assert one(metric.Perplexity(ignore_label=None), DOC_LABEL, DOC_PRED) == \
        pytest.approx(math.exp(-(math.log(0.3) + math.log(1.0) + math.log(0.6)) / 3))
    assert one(metric.MAE(), REG_LABEL, REG_PRED) == pytest.approx(0.5)
    assert one(metric.MSE(), REG_LABEL, REG_PRED) == pytest.approx(0.375)
    assert one(metric.RMSE(), REG_LABEL, REG_PRED) == pytest.approx(0.612372457981)
    custom = metric.CustomMetric(feval=lambda x, y: (x + y).mean())
    assert one(custom, REG_LABEL, REG_PRED) == pytest.approx(6.0)


@pytest.mark.parametrize("m,expected", [
    # mxnet 1.9.1
    (lambda: metric.create('acc'), 0.3333333333333333),
    (lambda: metric.create('top_k_accuracy', top_k=2), 0.3333333333333333),
    (lambda: metric.create('ce'), 1.2066458066304524),
    (lambda: metric.Perplexity(ignore_label=None), 3.3422549942493567),
    (lambda: metric.Perplexity(ignore_label=2), 4.4033132264335695),
])
def test_classification_values_from_mxnet(m, expected):
    assert _update(m(), [L6], [P6]).get()[1] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("name,expected,num_inst", [
    # mxnet 1.9.1: two updates, regression metrics average per batch
    ('mse', 1.296875, 2),
    ('mae', 1.0208333432674408, 2),
    ('rmse', 1.0431509912014008, 2),
    ('loss', 0.59375, 8),
])
def test_regression_values_from_mxnet(name, expected, num_inst):
    pred = np.array([[0.5, -1.0], [2.0, 0.25], [1.5, 3.0]], 'float32')
    label = np.array([[0.0, -1.5], [2.5, 0.0], [1.0, 2.0]], 'float32')
    m = metric.create(name)
    _update(m, [label], [pred])
    _update(m, [label[:1]], [pred[:1] * 3])
    assert m.get()[1] == pytest.approx(expected, rel=1e-6)
    assert m.num_inst == num_inst


def test_f1_macro_micro_from_mxnet():
    pred = np.array([[0.3, 0.7], [0.6, 0.4], [0.2, 0.8], [0.9, 0.1]], 'float32')
    for average in ('macro', 'micro'):
        m = metric.F1(average=average)
        _update(m, [[1, 1, 0, 0]], [pred])
        _update(m, [[1, 0, 1, 0]], [pred])
        assert m.get()[1] == pytest.approx(0.75)   # mxnet 1.9.1
    with pytest.raises(ValueError):
        _update(metric.F1(), [[0, 1, 2]], [DOC_PRED])


def test_top_k_by_hand():
    pred = np.array([[0.1, 0.2, 0.7], [0.5, 0.3, 0.2], [0.35, 0.4, 0.25]], 'float32')
    m = _update(metric.TopKAccuracy(top_k=2), [[0, 1, 0]], [pred])
    # row 0: top2 {2, 1} misses 0; row 1: {0, 1} hits 1; row 2: {1, 0} hits 0
    assert m.num_inst == 3
    assert m.get()[1] == pytest.approx(2 / 3)


def test_accuracy_axis_and_index_preds():
    # predictions already class indices (same shape as label)
    m = _update(metric.Accuracy(), [[1, 2, 3]], [[1, 2, 0]])
    assert m.get()[1] == pytest.approx(2 / 3)
    # class axis 0 instead of 1
    scores = np.array(DOC_PRED, 'float32').T
    m = _update(metric.Accuracy(axis=0), [DOC_LABEL], [scores])
    assert m.get()[1] == pytest.approx(2 / 3)


def test_inputs_as_torch_numpy_and_single_arrays():
    m = metric.Accuracy()
    m.update([torch.tensor(DOC_LABEL)], [torch.tensor(DOC_PRED)])
    m.update([np.array(DOC_LABEL)], [np.array(DOC_PRED)])
    m.update(nd(DOC_LABEL), nd(DOC_PRED))      # single arrays are wrapped
    assert m.num_inst == 9 and m.sum_metric == 6
    assert isinstance(nd(DOC_LABEL), NDArray)
    with pytest.raises(ValueError):
        m.update([nd(DOC_LABEL)], [nd(DOC_PRED), nd(DOC_PRED)])


def test_reset_local_keeps_global():
    m = metric.Accuracy()
    assert math.isnan(m.get()[1])
    m.update([nd([1, 0])], [nd([[0.1, 0.9], [0.2, 0.8]])])
    m.reset_local()
    m.update([nd([1, 0])], [nd([[0.1, 0.9], [0.9, 0.1]])])
    # mxnet 1.9.1
    assert m.get() == ('accuracy', 1.0)
    assert m.get_global() == ('accuracy', 0.75)
    assert m.get_global_name_value() == [('accuracy', 0.75)]
    assert m.get_name_value() == [('accuracy', 1.0)]
    m.reset()
    assert m.num_inst == 0 and m.global_num_inst == 0 and m.sum_metric == 0.0


def test_composite_reset_and_global():
    comp = metric.create(['acc', 'mse'])
    comp.update([nd(DOC_LABEL)], [nd([[0.3, 0.7], [0, 1.], [0.6, 0.4]])])
    names, values = comp.get()
    assert names == ['accuracy', 'mse']
    assert values[0] == pytest.approx(1 / 3)
    comp.reset_local()
    assert all(math.isnan(v) for v in comp.get()[1])
    assert comp.get_global()[1][0] == pytest.approx(1 / 3)
    assert [n for n, _ in comp.get_global_name_value()] == ['accuracy', 'mse']
    comp.reset()
    assert all(math.isnan(v) for v in comp.get_global()[1])


def test_update_dict_selects_names():
    m = metric.Accuracy(output_names=['out'], label_names=['lab'])
    m.update_dict({'lab': nd(DOC_LABEL), 'other': nd([9, 9, 9])},
                  {'out': nd(DOC_PRED), 'x': nd([[1, 0]] * 3)})
    assert m.get()[1] == pytest.approx(2 / 3)
    comp = metric.CompositeEvalMetric(['acc'], label_names=['lab'])
    comp.update_dict({'lab': nd(DOC_LABEL), 'other': nd([9, 9, 9])}, {'out': nd(DOC_PRED)})
    assert comp.get()[1][0] == pytest.approx(2 / 3)


def test_custom_metric_tuple_and_extra_outputs():
    m = metric.CustomMetric(lambda label, pred: (float(np.abs(label - pred).sum()), label.size),
                            name='l1', allow_extra_outputs=True)
    m.update([nd([1, 2])], [nd([1, 4]), nd([0, 0])])   # the extra output is ignored
    assert m.get() == ('l1', 1.0)
    assert isinstance(metric.np(lambda l, p: 0.0), metric.CustomMetric)
    with pytest.raises(NotImplementedError):
        m.get_config()


def test_perplexity_ignore_label_by_hand():
    pred = np.array([[0.5, 0.5], [0.25, 0.75], [0.9, 0.1]], 'float32')
    m = _update(metric.Perplexity(ignore_label=-1), [[0, 1, -1]], [pred])
    assert m.num_inst == 2
    assert m.get()[1] == pytest.approx(math.exp(-(math.log(0.5) + math.log(0.75)) / 2), rel=1e-6)


def test_loss_metric_and_str():
    m = metric.Loss()
    m.update(None, [nd([1.0, 2.0, 3.0])])
    assert m.get() == ('loss', 2.0)
    assert str(m) == "EvalMetric: {'loss': 2.0}"


# Binary scores: two batches, then reset_local and one more (mxnet 1.9.1 values).
BIN_PRED = np.array([[0.3, 0.7], [0.6, 0.4], [0.2, 0.8], [0.9, 0.1], [0.45, 0.55]], 'float32')
BIN_LABEL_A = [1, 1, 0, 0, 1]
BIN_LABEL_B = [1, 0, 1, 0, 0]


@pytest.mark.parametrize("make,first,after_local,counts", [
    # (local == global value after two batches, (local, global) after reset_local, counts)
    (lambda: metric.MCC(), 0.41666666666666663,
     (0.16666666666666666, 0.3333333333333333), (1.0, 3.0)),
    (lambda: metric.MCC(average='micro'), 0.408248290463863,
     (0.16666666666666666, 0.32732683535398854), (5, 15)),
    (lambda: metric.F1(), 0.7333333333333334, (0.6666666666666666, 0.7111111111111111), (1, 3)),
    (lambda: metric.F1(average='micro'), 0.7272727272727272,
     (0.6666666666666666, 0.7058823529411765), (5, 15)),
])
def test_binary_scores_local_and_global_from_mxnet(make, first, after_local, counts):
    m = make()
    _update(m, [BIN_LABEL_A], [BIN_PRED])
    _update(m, [BIN_LABEL_B], [BIN_PRED])
    assert m.get()[1] == first and m.get_global()[1] == first
    m.reset_local()
    _update(m, [BIN_LABEL_A], [BIN_PRED])
    assert (m.get()[1], m.get_global()[1]) == after_local
    assert (m.num_inst, m.global_num_inst) == counts
    # mxnet counts MCC's macro batches as floats and F1's as ints
    assert type(m.num_inst) is type(counts[0])


def test_pcc_grows_with_the_classes_seen_from_mxnet():
    pred = np.array([[0.1, 0.2, 0.7], [0.5, 0.3, 0.2], [0.2, 0.5, 0.3],
                     [0.6, 0.3, 0.1], [0.3, 0.3, 0.4], [0.1, 0.8, 0.1]], 'float32')
    label = [2, 0, 1, 1, 2, 1]
    m = _update(metric.PCC(), [label], [pred])
    assert m.get()[1] == pytest.approx(0.7833494518006403, rel=1e-12)   # mxnet 1.9.1
    _update(m, [[3, 0]], [[3, 1]])          # class indices, a fourth class
    assert m.k == 4 and m.num_inst == 2     # one count per update call
    assert m.get()[1] == pytest.approx(0.6521739130434783, rel=1e-12)
    m.reset_local()
    _update(m, [label], [pred])
    assert m.get()[1] == pytest.approx(0.7833494518006403, rel=1e-12)
    assert m.get_global()[1] == pytest.approx(0.6986049570427904, rel=1e-12)


def test_pearson_macro_and_running_micro_from_mxnet():
    x1 = np.array([0.1, 0.5, 0.3, 0.9, 0.7, 0.2], 'float32')
    y1 = np.array([0.0, 0.6, 0.2, 1.0, 0.5, 0.4], 'float32')
    x2 = np.array([1.5, -0.5, 0.3, 2.0], 'float32')
    y2 = np.array([1.0, 0.0, 0.9, 1.2], 'float32')
    macro = _update(_update(metric.create('pearsonr'), [y1], [x1]), [y2], [x2])
    assert macro.get()[1] == pytest.approx(0.8920764244817316, rel=1e-12)
    micro = metric.PearsonCorrelation(average='micro')
    _update(_update(micro, [y1], [x1]), [y2], [x2])
    assert micro.get()[1] == pytest.approx(0.8447751175046496, rel=1e-12)
    assert micro.get_global()[1] == 0.0     # mxnet 1.9.1 keeps no global micro sum


def test_top_k_one_dim_predictions_reach_the_local_sum_only():
    m = _update(metric.TopKAccuracy(top_k=2), [[0, 2, 1]], [[0.1, 0.5, 0.4]])
    # mxnet 1.9.1: sum 3.0 over 3 locally, 0.0 over 3 globally
    assert (m.sum_metric, m.num_inst) == (3.0, 3)
    assert (m.global_sum_metric, m.global_num_inst) == (0.0, 3)


def test_composite_keeps_children_and_returns_index_error():
    acc = _update(metric.Accuracy(), [BIN_LABEL_A], [BIN_PRED])
    comp = metric.CompositeEvalMetric([acc])
    assert comp.get() == (['accuracy'], [0.6])       # not reset by the constructor
    missing = comp.get_metric(5)
    assert isinstance(missing, ValueError)           # returned, not raised (mxnet 1.9.1)
    assert str(missing) == "Metric index 5 is out of range 0 and 1"
    assert metric.TopKAccuracy(top_k=3).get_config() == {
        'top_k': 3, 'metric': 'TopKAccuracy', 'name': 'top_k_accuracy_3',
        'output_names': None, 'label_names': None}
    assert metric.F1(average='micro').get_config() == {
        'metric': 'F1', 'name': 'f1', 'output_names': None, 'label_names': None}
