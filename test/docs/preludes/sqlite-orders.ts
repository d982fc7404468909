// `orderId`, and the application's `orders` table in app.db, which the example opens itself.
import PreludeDatabase from 'better-sqlite3';

export const orderId = 'o-42';
const preludeDb = new PreludeDatabase('app.db');
preludeDb.exec('CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)');
preludeDb.prepare('INSERT OR IGNORE INTO orders (id, status) VALUES (?, ?)').run(orderId, 'NEW');
preludeDb.close();
