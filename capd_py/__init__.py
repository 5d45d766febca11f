"""capd-py: Cluster API with a Docker infrastructure provider."""

__version__ = "0.1.0"
