"""Graph passes: each a pure function in a file named for what it does."""
