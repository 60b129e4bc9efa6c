"""The tile IR: what one fused kernel computes, independent of the target.

``tile_program`` builds a ``TileProgram`` per kernel group (the fusion legality check);
``tiles`` chooses tile sizes per target; ``dtypes`` and ``philox`` are the numeric facts
every target shares. Each target package (``compiler/triton``, ``compiler/cpu``)
imports this package and never another target.
"""
