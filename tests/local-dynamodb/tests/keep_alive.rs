//! The fault proxy's keeping-alive mode: a client's connection outlives moto's, which closes after each answer.

use local_dynamodb::LocalDynamo;
use local_dynamodb::fault_proxy::FaultProxy;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// A `ListTables` request (moto does not check the signature).
const LIST_TABLES: &str = "POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n\
    Content-Type: application/x-amz-json-1.0\r\nAuthorization: AWS4-HMAC-SHA256 \
    Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\n\
    Content-Length: 2\r\n\r\n{}";

/// Sends `LIST_TABLES` on `connection` and reads its answer: the head's lines, lower-cased, and the body.
async fn list_tables(connection: &mut BufReader<TcpStream>) -> (Vec<String>, String) {
    connection
        .get_mut()
        .write_all(LIST_TABLES.as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        assert!(
            connection.read_line(&mut line).await.unwrap() > 0,
            "the connection closed"
        );
        let line = line.trim_end().to_ascii_lowercase();
        if line.is_empty() {
            break;
        }
        head.push(line);
    }
    let length: usize = head
        .iter()
        .find_map(|l| l.strip_prefix("content-length:"))
        .expect("a content-length")
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0; length];
    connection.read_exact(&mut body).await.unwrap();
    (head, String::from_utf8(body).unwrap())
}

#[tokio::test]
async fn requests_follow_each_other_on_one_connection_though_moto_closes_each() {
    let moto = LocalDynamo::start(None).unwrap();
    let plain = FaultProxy::start(&moto.endpoint()).await.unwrap();
    let kept = FaultProxy::start_keeping_alive(&moto.endpoint())
        .await
        .unwrap();

    // Through the plain proxy, as from moto itself: the answer says the connection ends.
    let address = plain.endpoint().trim_start_matches("http://").to_string();
    let mut connection = BufReader::new(TcpStream::connect(address).await.unwrap());
    let (head, _) = list_tables(&mut connection).await;
    assert!(head.contains(&"connection: close".to_string()), "{head:?}");

    let address = kept.endpoint().trim_start_matches("http://").to_string();
    let mut connection = BufReader::new(TcpStream::connect(address).await.unwrap());
    for _ in 0..3 {
        let (head, body) = list_tables(&mut connection).await;
        assert!(head[0].starts_with("http/1.1 200"), "{head:?}");
        assert!(
            !head.iter().any(|l| l.starts_with("connection:")),
            "{head:?}"
        );
        assert!(body.contains("TableNames"), "{body}");
    }
    assert_eq!(kept.operations(), ["ListTables"; 3]);
}
