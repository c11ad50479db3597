from mailmortem.cli import main

main()
