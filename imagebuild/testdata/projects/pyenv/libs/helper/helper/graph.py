graph = None
