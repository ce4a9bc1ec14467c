"""lab — everything that runs JAX (see README.md here). Its modules are imported one by one, so this is empty."""
