"""Chapter 2 — TPUs (book ch. 2). Filled in below."""
