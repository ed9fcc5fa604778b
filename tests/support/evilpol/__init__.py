"""A contestant that patches the environment when imported (issue 35): see ``patch``."""
