"""One module per paper experiment: presets (the paper's hyperparameters in one place) and runners."""
