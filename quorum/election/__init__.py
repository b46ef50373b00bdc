"""Leader election (ZooKeeper's ``FastLeaderElection``, electionAlg=3). Pure.

* :mod:`.messages` -- the election port's wire: the connection handshake and notifications;
* :mod:`.election` -- the election as a pure state machine (notifications in, votes out).
"""
