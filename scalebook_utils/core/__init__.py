"""core — the book's cost models, pure Python + numpy (see README.md here). Importing it loads nothing heavy."""
