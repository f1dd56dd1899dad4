"""The only code that talks to AWS: one module per service, owning client configuration,
pagination, retries and throttling. Everything above works with plain data."""
