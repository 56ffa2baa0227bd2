"""pwf: an event-sourced host state for agent workflows."""
