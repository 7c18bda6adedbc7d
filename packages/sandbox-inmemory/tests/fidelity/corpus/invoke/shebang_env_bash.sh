./tool.sh --name demo
