"""Portal pages, one module per area: sign-in, tenants, platform admin, API tokens."""
