"""Built-in checks, one module per domain. Each check is a pure function of facts and
policy that returns an Outcome (see dldoctor.registry.check)."""
