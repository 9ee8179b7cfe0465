"""p4sub compiler: subscriptions and P4 protocol specs in, a target-neutral Pipeline IR out."""

__version__ = "0.1.0"
