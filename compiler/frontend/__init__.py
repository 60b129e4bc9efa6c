"""The front end: what an mxnet program describes, before any kernel exists.

The Symbol API itself is ``compiler/symbol.py`` (public as ``compiler.symbol``); this
package holds what it builds on and what reads it: the ``Graph`` every pass works on,
name and attribute scopes, the torch reference evaluator, context placement and batch
slicing. Nothing here knows about tiles or targets.
"""
