"""The ``cpu`` target: TileProgram -> a Python function of ATen calls."""
