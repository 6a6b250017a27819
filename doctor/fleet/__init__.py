"""`dldoctor fleet`: sweep a ClusterShell node set (`run`) and fold the node reports into
one (`report`): docs/fleet.md."""
