"""benchmarks/flops.py: matrix FLOPs read from inferred shapes, against hand counts."""
import math

import module_api as mx
from benchmarks.flops import forward_matrix_flops, peak_gemm_gflops, train_step_gflop
from benchmarks.module_fit import mlp
from examples.mnist_symbols import lenet


def test_mlp_and_lenet_forward_flops_are_the_hand_counts():
    assert forward_matrix_flops(mlp(512, 10), data=(128, 784), softmax_label=(128,)) == \
        2 * 128 * (784 * 512 + 512 * 512 + 512 * 10)
    # conv1 20 x 5x5 over 24x24 outputs, conv2 50 x (20 x 5x5) over 8x8, fc 800-500-10
    assert forward_matrix_flops(lenet(), data=(64, 1, 28, 28), softmax_label=(64,)) == \
        2 * 64 * (20 * 25 * 576 + 50 * 500 * 64 + 800 * 500 + 500 * 10)
    assert math.isclose(train_step_gflop(mlp(8, 2), data=(4, 3), softmax_label=(4,)),
                        3 * 2 * 4 * (3 * 8 + 8 * 8 + 8 * 2) / 1e9)


def test_dot_batch_dot_and_deconvolution_flops():
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    assert forward_matrix_flops(mx.sym.batch_dot(x, y, transpose_a=True),
                                x=(3, 4, 5), y=(3, 4, 6)) == 2 * 3 * 5 * 6 * 4
    assert forward_matrix_flops(mx.sym.dot(x, y), x=(7, 5), y=(5, 2)) == 2 * 7 * 2 * 5
    assert forward_matrix_flops(mx.sym.Deconvolution(x, kernel=(3, 3), num_filter=8),
                                x=(2, 4, 5, 5)) == 2 * (2 * 4 * 5 * 5) * 8 * 9


def test_peak_gemm_rate_is_measured():
    assert peak_gemm_gflops(size=128, repeats=2) > 0.1
