from capd_py.cli.main import main

main()
