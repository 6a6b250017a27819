"""Support bundles: the directory format, writing and safe reading (redaction and
`dldoctor snapshot` arrive with the snapshot work)."""
