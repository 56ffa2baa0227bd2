"""``python -m pwf`` runs the command line."""

from pwf.cli import main

main()
