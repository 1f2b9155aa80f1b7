from lab._cli import main

raise SystemExit(main())
