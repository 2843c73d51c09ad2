"""The simulator's platform adapters: scenarios from recorded usage, quota simulations, autoscaling plans,
and their portal pages. Django lives here, not in scheduling.simulator (which stays pure); these read
billing's recorded usage and prices, so the package sits above billing in the layers contract."""
