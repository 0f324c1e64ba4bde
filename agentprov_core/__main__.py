from agentprov_core.cli.main import main

main()
