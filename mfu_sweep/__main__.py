from mfu_sweep.cli import main

main()
