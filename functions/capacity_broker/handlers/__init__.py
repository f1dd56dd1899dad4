"""Lambda entry points: ``capacity_broker.handlers.<name>.handler`` (contract)."""
