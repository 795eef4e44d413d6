"""What a run used: CPU and memory of every process, the network traffic between nodes, energy,
the cost on rented machines and the profiles of `--profile`."""
