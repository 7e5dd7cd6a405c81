"""Example models trained with staged."""
