"""warmcore: should this task run on the thread that produced it, or be dispatched?"""
