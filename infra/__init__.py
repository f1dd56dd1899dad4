"""CDK (v2, Python) deployment of the capacity broker: one stack assembled from one construct
per concern (state, flags, functions, permissions, events, observability)."""
