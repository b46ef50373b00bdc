"""Every record of ZooKeeper's ``zookeeper.jute``, one declaration each.

Grouped and ordered as zookeeper.jute groups them (modules ``data``, ``proto``, ``quorum``,
``persistence``, ``txn``). Field names and order are the wire contract; do not reorder.
Each class is a frozen slotted dataclass with ``decode``/``decode_from``/``encode`` (generated
fast path) and ``construct`` (reference codec); see :mod:`trizk.jute.primitives`.
"""

from __future__ import annotations

from trizk.jute.primitives import BOOL, BUFFER, INT, LONG, USTRING, Record, field, record, vector

# ---------------------------------------------------------------- module org.apache.zookeeper.data


@record("data")
class Id(Record):
    scheme: str | None = field(USTRING)
    id: str | None = field(USTRING)


@record("data")
class ACL(Record):
    perms: int = field(INT)
    id: Id = field(Id)


@record("data")
class Stat(Record):
    czxid: int = field(LONG)
    mzxid: int = field(LONG)
    ctime: int = field(LONG)
    mtime: int = field(LONG)
    version: int = field(INT)
    cversion: int = field(INT)
    aversion: int = field(INT)
    ephemeralOwner: int = field(LONG)
    dataLength: int = field(INT)
    numChildren: int = field(INT)
    pzxid: int = field(LONG)


@record("data")
class StatPersisted(Record):
    czxid: int = field(LONG)
    mzxid: int = field(LONG)
    ctime: int = field(LONG)
    mtime: int = field(LONG)
    version: int = field(INT)
    cversion: int = field(INT)
    aversion: int = field(INT)
    ephemeralOwner: int = field(LONG)
    pzxid: int = field(LONG)


# --------------------------------------------------------------- module org.apache.zookeeper.proto


@record("proto")
class ConnectRequest(Record):
    protocolVersion: int = field(INT)
    lastZxidSeen: int = field(LONG)
    timeOut: int = field(INT)
    sessionId: int = field(LONG)
    passwd: bytes | None = field(BUFFER)


@record("proto")
class ConnectResponse(Record):
    protocolVersion: int = field(INT)
    timeOut: int = field(INT)
    sessionId: int = field(LONG)
    passwd: bytes | None = field(BUFFER)


@record("proto")
class SetWatches(Record):
    relativeZxid: int = field(LONG)
    dataWatches: tuple[str, ...] | None = field(vector(USTRING))
    existWatches: tuple[str, ...] | None = field(vector(USTRING))
    childWatches: tuple[str, ...] | None = field(vector(USTRING))


@record("proto")
class SetWatches2(Record):
    relativeZxid: int = field(LONG)
    dataWatches: tuple[str, ...] | None = field(vector(USTRING))
    existWatches: tuple[str, ...] | None = field(vector(USTRING))
    childWatches: tuple[str, ...] | None = field(vector(USTRING))
    persistentWatches: tuple[str, ...] | None = field(vector(USTRING))
    persistentRecursiveWatches: tuple[str, ...] | None = field(vector(USTRING))


@record("proto")
class RequestHeader(Record):
    xid: int = field(INT)
    type: int = field(INT)


@record("proto")
class MultiHeader(Record):
    type: int = field(INT)
    done: bool = field(BOOL)
    err: int = field(INT)


@record("proto")
class AuthPacket(Record):
    type: int = field(INT)
    scheme: str | None = field(USTRING)
    auth: bytes | None = field(BUFFER)


@record("proto")
class ReplyHeader(Record):
    xid: int = field(INT)
    zxid: int = field(LONG)
    err: int = field(INT)


@record("proto")
class GetDataRequest(Record):
    path: str | None = field(USTRING)
    watch: bool = field(BOOL)


@record("proto")
class SetDataRequest(Record):
    path: str | None = field(USTRING)
    data: bytes | None = field(BUFFER)
    version: int = field(INT)


@record("proto")
class ReconfigRequest(Record):
    joiningServers: str | None = field(USTRING)
    leavingServers: str | None = field(USTRING)
    newMembers: str | None = field(USTRING)
    curConfigId: int = field(LONG)


@record("proto")
class SetDataResponse(Record):
    stat: Stat = field(Stat)


@record("proto")
class GetSASLRequest(Record):
    token: bytes | None = field(BUFFER)


@record("proto")
class SetSASLRequest(Record):
    token: bytes | None = field(BUFFER)


@record("proto")
class SetSASLResponse(Record):
    token: bytes | None = field(BUFFER)


@record("proto")
class CreateRequest(Record):
    path: str | None = field(USTRING)
    data: bytes | None = field(BUFFER)
    acl: tuple[ACL, ...] | None = field(vector(ACL))
    flags: int = field(INT)


@record("proto")
class CreateTTLRequest(Record):
    path: str | None = field(USTRING)
    data: bytes | None = field(BUFFER)
    acl: tuple[ACL, ...] | None = field(vector(ACL))
    flags: int = field(INT)
    ttl: int = field(LONG)


@record("proto")
class DeleteRequest(Record):
    path: str | None = field(USTRING)
    version: int = field(INT)


@record("proto")
class GetChildrenRequest(Record):
    path: str | None = field(USTRING)
    watch: bool = field(BOOL)


@record("proto")
class GetAllChildrenNumberRequest(Record):
    path: str | None = field(USTRING)


@record("proto")
class GetStatPersistedRequest(Record):
    path: str | None = field(USTRING)


@record("proto")
class GetChildren2Request(Record):
    path: str | None = field(USTRING)
    watch: bool = field(BOOL)


@record("proto")
class CheckVersionRequest(Record):
    path: str | None = field(USTRING)
    version: int = field(INT)


@record("proto")
class GetMaxChildrenRequest(Record):
    path: str | None = field(USTRING)


@record("proto")
class GetMaxChildrenResponse(Record):
    max: int = field(INT)


@record("proto")
class SetMaxChildrenRequest(Record):
    path: str | None = field(USTRING)
    max: int = field(INT)


@record("proto")
class SyncRequest(Record):
    path: str | None = field(USTRING)


@record("proto")
class SyncResponse(Record):
    path: str | None = field(USTRING)


@record("proto")
class GetACLRequest(Record):
    path: str | None = field(USTRING)


@record("proto")
class SetACLRequest(Record):
    path: str | None = field(USTRING)
    acl: tuple[ACL, ...] | None = field(vector(ACL))
    version: int = field(INT)


@record("proto")
class SetACLResponse(Record):
    stat: Stat = field(Stat)


@record("proto")
class AddWatchRequest(Record):
    path: str | None = field(USTRING)
    mode: int = field(INT)


@record("proto")
class WatcherEvent(Record):
    type: int = field(INT)
    state: int = field(INT)
    path: str | None = field(USTRING)


@record("proto")
class ErrorResponse(Record):
    err: int = field(INT)


@record("proto")
class CreateResponse(Record):
    path: str | None = field(USTRING)


@record("proto")
class Create2Response(Record):
    path: str | None = field(USTRING)
    stat: Stat = field(Stat)


@record("proto")
class ExistsRequest(Record):
    path: str | None = field(USTRING)
    watch: bool = field(BOOL)


@record("proto")
class ExistsResponse(Record):
    stat: Stat = field(Stat)


@record("proto")
class GetDataResponse(Record):
    data: bytes | None = field(BUFFER)
    stat: Stat = field(Stat)


@record("proto")
class GetChildrenResponse(Record):
    children: tuple[str, ...] | None = field(vector(USTRING))


@record("proto")
class GetAllChildrenNumberResponse(Record):
    totalNumber: int = field(INT)


@record("proto")
class GetStatPersistedResponse(Record):
    statPersisted: StatPersisted = field(StatPersisted)


@record("proto")
class GetChildren2Response(Record):
    children: tuple[str, ...] | None = field(vector(USTRING))
    stat: Stat = field(Stat)


@record("proto")
class GetACLResponse(Record):
    acl: tuple[ACL, ...] | None = field(vector(ACL))
    stat: Stat = field(Stat)


@record("proto")
class CheckWatchesRequest(Record):
    path: str | None = field(USTRING)
    type: int = field(INT)


@record("proto")
class RemoveWatchesRequest(Record):
    path: str | None = field(USTRING)
    type: int = field(INT)


@record("proto")
class GetEphemeralsRequest(Record):
    prefixPath: str | None = field(USTRING)


@record("proto")
class GetEphemeralsResponse(Record):
    ephemerals: tuple[str, ...] | None = field(vector(USTRING))


# The whoAmI reply (opcode 107) is ``vector<ClientInfo>``; ClientInfo lives in zookeeper.jute's
# proto module in 3.8 (authScheme, user).
@record("proto")
class ClientInfo(Record):
    authScheme: str | None = field(USTRING)
    user: str | None = field(USTRING)


@record("proto")
class WhoAmIResponse(Record):
    clientInfo: tuple[ClientInfo, ...] | None = field(vector(ClientInfo))


# ------------------------------------------------------ module org.apache.zookeeper.server.quorum


@record("quorum")
class LearnerInfo(Record):
    serverid: int = field(LONG)
    protocolVersion: int = field(INT)
    configVersion: int = field(LONG)


@record("quorum")
class QuorumPacket(Record):
    type: int = field(INT)
    zxid: int = field(LONG)
    data: bytes | None = field(BUFFER)
    authinfo: tuple[Id, ...] | None = field(vector(Id))


@record("quorum")
class QuorumAuthPacket(Record):
    magic: int = field(LONG)
    status: int = field(INT)
    token: bytes | None = field(BUFFER)


# ------------------------------------------------- module org.apache.zookeeper.server.persistence


@record("persistence")
class FileHeader(Record):
    magic: int = field(INT)
    version: int = field(INT)
    dbid: int = field(LONG)


# ----------------------------------------------------------------- module org.apache.zookeeper.txn


@record("txn")
class TxnDigest(Record):
    version: int = field(INT)
    treeDigest: int = field(LONG)


@record("txn")
class TxnHeader(Record):
    clientId: int = field(LONG)
    cxid: int = field(INT)
    zxid: int = field(LONG)
    time: int = field(LONG)
    type: int = field(INT)


@record("txn")
class CreateTxnV0(Record):
    path: str | None = field(USTRING)
    data: bytes | None = field(BUFFER)
    acl: tuple[ACL, ...] | None = field(vector(ACL))
    ephemeral: bool = field(BOOL)


@record("txn")
class CreateTxn(Record):
    path: str | None = field(USTRING)
    data: bytes | None = field(BUFFER)
    acl: tuple[ACL, ...] | None = field(vector(ACL))
    ephemeral: bool = field(BOOL)
    parentCVersion: int = field(INT)


@record("txn")
class CreateTTLTxn(Record):
    path: str | None = field(USTRING)
    data: bytes | None = field(BUFFER)
    acl: tuple[ACL, ...] | None = field(vector(ACL))
    parentCVersion: int = field(INT)
    ttl: int = field(LONG)


@record("txn")
class CreateContainerTxn(Record):
    path: str | None = field(USTRING)
    data: bytes | None = field(BUFFER)
    acl: tuple[ACL, ...] | None = field(vector(ACL))
    parentCVersion: int = field(INT)


@record("txn")
class DeleteTxn(Record):
    path: str | None = field(USTRING)


@record("txn")
class SetDataTxn(Record):
    path: str | None = field(USTRING)
    data: bytes | None = field(BUFFER)
    version: int = field(INT)


@record("txn")
class CheckVersionTxn(Record):
    path: str | None = field(USTRING)
    version: int = field(INT)


@record("txn")
class SetACLTxn(Record):
    path: str | None = field(USTRING)
    acl: tuple[ACL, ...] | None = field(vector(ACL))
    version: int = field(INT)


@record("txn")
class SetMaxChildrenTxn(Record):
    path: str | None = field(USTRING)
    max: int = field(INT)


@record("txn")
class CreateSessionTxn(Record):
    timeOut: int = field(INT)


@record("txn")
class CloseSessionTxn(Record):
    paths2Delete: tuple[str, ...] | None = field(vector(USTRING))


@record("txn")
class ErrorTxn(Record):
    err: int = field(INT)


@record("txn")
class Txn(Record):
    type: int = field(INT)
    data: bytes | None = field(BUFFER)


@record("txn")
class MultiTxn(Record):
    txns: tuple[Txn, ...] | None = field(vector(Txn))
