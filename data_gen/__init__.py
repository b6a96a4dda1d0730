"""data_gen."""
