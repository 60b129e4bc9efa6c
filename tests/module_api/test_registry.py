"""mx.registry: the name -> class tables behind mx.init.create and mx.metric.create."""
import json
import warnings

import pytest

import module_api as mx


def _family():
    class Shape:
        """A family of its own in each test, so tests leave each other's and the real
        tables alone."""

        def __init__(self, size=1):
            self.size = size

    register = mx.registry.get_register_func(Shape, 'shape')
    alias = mx.registry.get_alias_func(Shape, 'shape')
    create = mx.registry.get_create_func(Shape, 'shape')

    @register
    @alias('sq', 'box')
    class Square(Shape):
        pass

    return register, create, Square, Shape


def test_create_from_every_spec_a_family_writes():
    register, create, square, Shape = _family()
    assert create('Square', 3).size == 3          # names are case-insensitive
    assert create('sq', size=4).size == 4
    assert create({'shape': 'box', 'size': 5}).size == 5
    assert create(shape='square', size=6).size == 6
    assert create(json.dumps(['square', {'size': 7}])).size == 7
    assert create(json.dumps({'shape': 'sq', 'size': 8})).size == 8
    made = square(9)
    assert create(made) is made
    assert set(mx.registry.get_registry(Shape)) == {'square', 'sq', 'box'}
    mx.registry.get_registry(Shape).clear()        # a copy: the table keeps its names
    assert create('box').size == 1


def test_errors_are_both_what_mxnet_raises_and_what_the_families_raised():
    register, create, square, Shape = _family()
    with pytest.raises(ValueError, match="circle is not registered. Please register with "
                                         r"shape.register first \(registered: box, sq, square\)"):
        create('circle')
    with pytest.raises(AssertionError, match="circle is not registered"):
        create('circle')
    with pytest.raises(TypeError, match="shape must be of string type"):
        create(3)
    with pytest.raises(AssertionError, match="shape must be of string type"):
        create(3)
    with pytest.raises(AssertionError, match="already an instance"):
        create(square(), 2)
    with pytest.raises(AssertionError, match="already given as JSON text"):
        create('["square", {}]', 2)
    with pytest.raises(TypeError, match="Can only register subclass of Shape"):
        register(int)


def test_registering_another_class_under_a_taken_name_warns():
    register, create, square, Shape = _family()

    class Other(Shape):
        pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        register(square)                            # the same class again: quiet
        register(Other, 'sq')
    assert len(caught) == 1
    assert "registered with name sq is overriding existing shape" in str(caught[0].message)
    assert type(create('sq')) is Other


def test_the_families_use_it():
    assert type(mx.init.create('zeros')) is mx.init.Zero
    assert 'xavier' in mx.registry.get_registry(mx.init.Initializer)
    assert type(mx.metric.create('acc')) is mx.metric.Accuracy
    assert 'top_k_accuracy' in mx.registry.get_registry(mx.metric.EvalMetric)
    with pytest.raises(ValueError, match="nosuch is not registered. Please register with "
                                         "metric.register first"):
        mx.metric.create('nosuch')
