from p4sub import cli

cli()
