"""Numbers of the ZooKeeper protocol, named as ZooKeeper names them.

Sources: ``ZooDefs.OpCode``, ``ZooDefs.Perms``, ``KeeperException.Code``,
``Watcher.Event.EventType``, ``Watcher.Event.KeeperState``, ``Watcher.WatcherType``,
``CreateMode``, ``AddWatchMode`` and the special xids of ``ClientCnxn``.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import Final


class OpCode(IntEnum):
    NOTIFICATION = 0
    CREATE = 1
    DELETE = 2
    EXISTS = 3
    GETDATA = 4
    SETDATA = 5
    GETACL = 6
    SETACL = 7
    GETCHILDREN = 8
    SYNC = 9
    PING = 11
    GETCHILDREN2 = 12
    CHECK = 13
    MULTI = 14
    CREATE2 = 15
    RECONFIG = 16
    CHECKWATCHES = 17
    REMOVEWATCHES = 18
    CREATECONTAINER = 19
    DELETECONTAINER = 20
    CREATETTL = 21
    MULTIREAD = 22
    AUTH = 100
    SETWATCHES = 101
    SASL = 102
    GETEPHEMERALS = 103
    GETALLCHILDRENNUMBER = 104
    SETWATCHES2 = 105
    ADDWATCH = 106
    WHOAMI = 107
    CREATESESSION = -10
    CLOSESESSION = -11
    ERROR = -1


class Code(IntEnum):
    """KeeperException.Code."""

    OK = 0
    SYSTEMERROR = -1
    RUNTIMEINCONSISTENCY = -2
    DATAINCONSISTENCY = -3
    CONNECTIONLOSS = -4
    MARSHALLINGERROR = -5
    UNIMPLEMENTED = -6
    OPERATIONTIMEOUT = -7
    BADARGUMENTS = -8
    UNKNOWNSESSION = -12
    NEWCONFIGNOQUORUM = -13
    RECONFIGINPROGRESS = -14
    APIERROR = -100
    NONODE = -101
    NOAUTH = -102
    BADVERSION = -103
    NOCHILDRENFOREPHEMERALS = -108
    NODEEXISTS = -110
    NOTEMPTY = -111
    SESSIONEXPIRED = -112
    INVALIDCALLBACK = -113
    INVALIDACL = -114
    AUTHFAILED = -115
    SESSIONMOVED = -118
    NOTREADONLY = -119
    EPHEMERALONLOCALSESSION = -120
    NOWATCHER = -121
    REQUESTTIMEOUT = -122
    RECONFIGDISABLED = -123
    SESSIONCLOSEDREQUIRESASLAUTH = -124
    QUOTAEXCEEDED = -125
    THROTTLEDOP = -127


class KeeperError(Exception):
    """An error answered to the client as ``code`` (ZooKeeper's KeeperException)."""

    def __init__(self, code: Code) -> None:
        super().__init__(code.name)
        self.code = code


class JavaRuntimeError(ValueError):
    """Where ZooKeeper's Java code throws an unchecked exception on odd input (a
    NullPointerException on a null path, a ClassCastException on a mismatched multi op...):
    its request processors catch it as a plain ``Exception`` and answer MARSHALLINGERROR, which,
    unlike a KeeperException, fails a whole multi rather than one of its ops."""


class EventType(IntEnum):
    NONE = -1
    NODECREATED = 1
    NODEDELETED = 2
    NODEDATACHANGED = 3
    NODECHILDRENCHANGED = 4
    DATAWATCHREMOVED = 5
    CHILDWATCHREMOVED = 6
    PERSISTENTWATCHREMOVED = 7


class KeeperState(IntEnum):
    UNKNOWN = -1
    DISCONNECTED = 0
    NOSYNCCONNECTED = 1
    SYNCCONNECTED = 3
    AUTHFAILED = 4
    CONNECTEDREADONLY = 5
    SASLAUTHENTICATED = 6
    EXPIRED = -112
    CLOSED = 7


class WatcherType(IntEnum):
    CHILDREN = 1
    DATA = 2
    ANY = 3
    PERSISTENT = 4
    PERSISTENT_RECURSIVE = 5


class AddWatchMode(IntEnum):
    PERSISTENT = 0
    PERSISTENT_RECURSIVE = 1


class CreateMode(IntEnum):
    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3
    CONTAINER = 4
    PERSISTENT_WITH_TTL = 5
    PERSISTENT_SEQUENTIAL_WITH_TTL = 6

    @property
    def ephemeral(self) -> bool:
        return self in (CreateMode.EPHEMERAL, CreateMode.EPHEMERAL_SEQUENTIAL)

    @property
    def sequential(self) -> bool:
        return self in (
            CreateMode.PERSISTENT_SEQUENTIAL,
            CreateMode.EPHEMERAL_SEQUENTIAL,
            CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL,
        )

    @property
    def container(self) -> bool:
        return self is CreateMode.CONTAINER

    @property
    def ttl(self) -> bool:
        return self in (CreateMode.PERSISTENT_WITH_TTL, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL)


class Perms(IntFlag):
    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


class Xid:
    """Special xids (ClientCnxn)."""

    NOTIFICATION: Final = -1
    PING: Final = -2
    AUTH: Final = -4
    SET_WATCHES: Final = -8


#: ephemeralOwner of a container node (EphemeralType.CONTAINER_EPHEMERAL_OWNER).
CONTAINER_EPHEMERAL_OWNER = -0x8000000000000000
#: The ``protocolVersion`` ZooKeeper 3.x servers put in ConnectResponse.
PROTOCOL_VERSION = 0
