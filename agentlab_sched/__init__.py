"""agentlab-sched: a Postgres-native scheduler for agent and workflow runs."""
