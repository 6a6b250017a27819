from dldoctor.cli import main

raise SystemExit(main())
