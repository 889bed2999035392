"""``python -m plog.cli``: the same entry point as the ``plog`` script."""

from .entry import main

main()
