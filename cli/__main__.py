"""``python -m plog.cli``: the same entry point as the ``plog`` script."""

from .main import main

main()
