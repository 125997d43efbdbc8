"""``python -m inductor_lens`` runs the command line."""

from .cli import main

main()
