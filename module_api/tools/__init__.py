"""Command-line tools of mxnet's ``tools/`` folder (``python -m module_api.tools.im2rec``)."""
