"""GPU node pools: the pools platform admins define (models) and their Karpenter NodePools (render)."""
