"""What the compiler produces and keeps: ``Program``, the cache, ahead-of-time directories.

``compile.compile_symbol`` is the driver (cache key, then the pass pipeline, then a
Program); ``cache`` and ``cache_trust`` own the memory and disk cache; ``aot`` and
``aot_verify`` fill and check directories for ``symtriton compile`` / ``cache verify``.
"""
