"""views — figures and widgets, one module per chapter over `_kit` (see README.md). Empty: no eager matplotlib."""
