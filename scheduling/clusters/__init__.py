"""Host clusters: placements, delivery of rendered objects, fleet sync and MultiKueue."""
