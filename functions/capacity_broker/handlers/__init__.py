"""Lambda entry points: ``capacity_broker.handlers.<name>.handler`` (the contract:
docs/contract.md)."""
