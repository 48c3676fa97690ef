from chainrecall.cli import main

main()
