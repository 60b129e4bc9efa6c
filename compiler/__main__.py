"""``python -m compiler``: the same command as the ``symtriton`` console script."""
import sys

from .cli import main

sys.exit(main())
